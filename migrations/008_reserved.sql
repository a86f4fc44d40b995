-- Number 8 is another change's migration; this empty file only keeps the
-- sequence whole where that change is absent. Drop it when 008 is present.
SELECT 1;
