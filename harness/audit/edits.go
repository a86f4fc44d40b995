package audit

// judgeEdits counts the documents edits replaced and put in place, and
// how many of each reached the destinations. A replacement is a package
// like any other (its absence is already Missing); a replaced document is
// counted only to show how many were mirrored before their edit.
func (c *checker) judgeEdits(rep *Report, delivered func(Package) bool) {
	for _, p := range c.t.Packages {
		switch {
		case p.Edit:
			rep.EditedDocuments++
			if delivered(p) {
				rep.EditedDelivered++
			}
		case p.Replaced:
			if delivered(p) {
				rep.ReplacedDelivered++
			}
		}
	}
}
