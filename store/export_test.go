package store

// BuildSearch exposes the search SQL to the plan checks and the benchmark.
func BuildSearch(q SearchQuery) (sql string, args []any, err error) {
	sql, args, _, err = buildSearch(q)
	return sql, args, err
}
