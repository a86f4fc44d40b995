# mk/fuzz-archive.mk: the archive package's fuzz targets, each run briefly.
#
# Targets
#   test-fuzz-archive  Runs every fuzz target of ./archive/ (one per
#                      container format, one for set assembly, the listing
#                      and name parsers) for FUZZ_ARCHIVE_TIME each, starting
#                      from the committed corpus in archive/testdata/fuzz/.
#                      A crash fails the target and leaves its input in
#                      archive/testdata/fuzz/<Target>/ to commit as a test.

FUZZ_ARCHIVE_TIME    ?= 5s
FUZZ_ARCHIVE_TARGETS ?= FuzzZip FuzzRar Fuzz7z FuzzTar FuzzAssemble FuzzList

.PHONY: test-fuzz-archive

test-fuzz-archive:
	@for target in $(FUZZ_ARCHIVE_TARGETS); do \
		echo "fuzz $$target ($(FUZZ_ARCHIVE_TIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZ_ARCHIVE_TIME) -parallel 2 ./archive/ || exit 1; \
	done
