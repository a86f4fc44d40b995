package audit

import "encoding/json"

// Report is the audit: what was published, what the catalogue and the
// destinations hold, and the verdict (OK). Run-specific figures (restarts,
// calls, disk peaks) are filled by the caller.
type Report struct {
	// Mode is what the audit required of each package: ModeFull
	// (catalogued and delivered) or ModeCatalogue (catalogued; deliveries
	// may still wait).
	Mode                 string `json:"mode"`
	PublishedArchives    int    `json:"published_archives"`
	UniquePackages       int    `json:"unique_packages"`
	CataloguedPackages   int    `json:"catalogued_packages"`
	DeliveredPackages    int    `json:"delivered_packages"`
	DuplicateDeliveries  int    `json:"duplicate_deliveries"`
	Missing              int    `json:"missing"`
	DeadLetters          int    `json:"dead_letters"`
	Corrupt              int    `json:"corrupt_archives"`
	CorruptListingErrors int    `json:"corrupt_with_listing_error"`
	// CorruptDeadLettered corrupt archives failed verification and are
	// dead letters saying so (deliver_broken = false).
	CorruptDeadLettered    int `json:"corrupt_dead_lettered"`
	IncompleteSets         int `json:"incomplete_sets"`
	IncompleteDeadLettered int `json:"incomplete_sets_dead_lettered"`
	IncompleteDelivered    int `json:"incomplete_sets_delivered"`
	Restarts               int `json:"restarts"`
	// Logouts counts the accounts logged out remotely during the run (and
	// logged in again).
	Logouts int  `json:"logouts"`
	Settled bool `json:"settled"`
	// Unsettled is what was still pending when the run gave up waiting
	// for the pipeline to settle (empty when it settled).
	Unsettled      string         `json:"unsettled,omitempty"`
	Calls          map[string]int `json:"calls"`
	RestartCalls   map[string]int `json:"restart_calls,omitempty"`
	ElapsedSeconds float64        `json:"elapsed_seconds"`
	// Send outcomes the simulator imposed (FailSends, VanishSends) and the
	// sends of a killed session it finished after the restart.
	FailedSends      int `json:"failed_sends"`
	FloodWaitedSends int `json:"flood_waited_sends"`
	ResentSends      int `json:"resent_sends"`
	VanishedSends    int `json:"vanished_sends"`
	// Packages of vanished sends: delivered later, a dead letter with its
	// reason, or neither (a failure).
	VanishedDelivered    int `json:"vanished_sends_delivered"`
	VanishedDeadLettered int `json:"vanished_sends_dead_lettered"`
	VanishedUnresolved   int `json:"vanished_sends_unresolved"`
	// ClosedTopics and DeletedTopics count the destination forum topics
	// the world closed and deleted while stashd delivered into them.
	ClosedTopics  int `json:"closed_topics"`
	DeletedTopics int `json:"deleted_topics"`
	// ChatFloodedSends counts sends a destination's own send limit
	// refused with 429.
	ChatFloodedSends int `json:"chat_flooded_sends"`
	// ChatWaitsSatOut counts the waits of a destination's send limit
	// that TDLib sat out itself: the send landed late, or was refused
	// after.
	ChatWaitsSatOut int `json:"chat_waits_sat_out"`
	// StalledDownloads is how many downloads the world stalled or failed.
	StalledDownloads int `json:"stalled_downloads"`
	// PeakDownloadBytes is the most bytes the downloads directory held at
	// once, over all accounts; PeakAccountDownloadBytes the most one
	// account's directory held, to compare with DownloadBudgetBytes.
	PeakDownloadBytes        int64 `json:"peak_download_bytes"`
	PeakAccountDownloadBytes int64 `json:"peak_account_download_bytes"`
	DownloadBudgetBytes      int64 `json:"download_budget_bytes"`
	// DiskOverBudget: one account's downloads held more than the budget
	// (or, when larger, the largest package, which proceeds alone). Only
	// judged in runs without restarts: a daemon stopped mid-package leaves
	// its downloads behind, and the simulator's next instance, with new
	// file ids, never deletes them.
	DiskOverBudget bool `json:"disk_over_budget"`
	// LargestPackage is the size in bytes of the largest published package.
	LargestPackage int64    `json:"-"`
	MissingNames   []string `json:"missing_names,omitempty"`
	// DuplicateNames names each part found in a destination more than once.
	DuplicateNames []string `json:"duplicate_names,omitempty"`
	// OtherDeadLetters are dead letters no incomplete set explains (send
	// failures, a part that went away…), with their reasons.
	OtherDeadLetters []string `json:"other_dead_letters,omitempty"`
	// InaccessibleSources lost access during the run; the catalogue
	// records RecordedInaccessible of them as inaccessible with a reason.
	InaccessibleSources  int `json:"inaccessible_sources"`
	RecordedInaccessible int `json:"recorded_inaccessible"`
	// InaccessibleSourceIDs lists the sources that lost access, by id.
	InaccessibleSourceIDs []int64 `json:"inaccessible_source_ids,omitempty"`
	// EditedDocuments counts the documents edits put in place of earlier
	// ones (editMessageMedia); EditedDelivered those of them delivered (a
	// missing one also counts in Missing). ReplacedDelivered counts the
	// replaced documents that were mirrored before their edit.
	EditedDocuments   int `json:"edited_documents"`
	EditedDelivered   int `json:"edited_documents_delivered"`
	ReplacedDelivered int `json:"replaced_documents_delivered"`
	// ProtectedSources have protected content.
	ProtectedSources int `json:"protected_sources"`
	// LostUndelivered packages were published only in sources that lost
	// access and were not delivered before; the source's recorded access
	// explains them.
	LostUndelivered int `json:"lost_undelivered"`
	// ProtectedRecorded packages were published only in protected sources
	// and are dead letters with the protected-content reason.
	ProtectedRecorded int `json:"protected_recorded"`
	// RouteViolations counts (package, destination) pairs where a package
	// is in a destination no route sends it to, and copies in a forum
	// topic of a destination other than the one their route names there;
	// zero without routes.
	RouteViolations     int      `json:"route_violations"`
	RouteViolationNames []string `json:"route_violation_names,omitempty"`
	// SessionOverlaps counts the requests an older session of an account
	// made once a newer one had made its own (two instances running one
	// account at once); SessionOverlapNames describes the first few.
	SessionOverlaps     int      `json:"session_overlaps"`
	SessionOverlapNames []string `json:"session_overlap_names,omitempty"`
	// FloodWaitBreaches counts the requests an account made inside a flood
	// wait Telegram had asked of it; FloodWaitBreachNames describes the
	// first few.
	FloodWaitBreaches    int      `json:"flood_wait_breaches"`
	FloodWaitBreachNames []string `json:"flood_wait_breach_names,omitempty"`
	// DeliveriesRecovered counts the delivery records rebuilt from the
	// destinations after the catalogue rewound; RestoredBackup says the
	// run restored its catalogue from a backup before this audit.
	DeliveriesRecovered int64 `json:"deliveries_recovered"`
	RestoredBackup      bool  `json:"restored_backup,omitempty"`
	// DeliveryBacklog counts the (package, destination) deliveries its
	// routes require that are not made yet; with ModeFull each is also
	// Missing.
	DeliveryBacklog int `json:"delivery_backlog"`
	// CatalogueLagP99Seconds is the 99th percentile, over the catalogued
	// packages, of the time from publication (the last part's date) to
	// the package's catalogue row.
	CatalogueLagP99Seconds float64 `json:"catalogue_lag_p99_seconds"`
	// PostDirFiles are the files posted from a directory with a manifest
	// (demo --post-dir); PostDirWrong of them did not meet their
	// expectation, each described in PostDirWrongNames.
	PostDirFiles      int      `json:"post_dir_files,omitempty"`
	PostDirWrong      int      `json:"post_dir_wrong"`
	PostDirWrongNames []string `json:"post_dir_wrong_names,omitempty"`
	// RepacksPublished are the repacks the world posted (the same files
	// as an earlier package in another container); RepacksDetected of them
	// are catalogued and linked as repacks; RepacksDelivered of them were
	// delivered all the same.
	RepacksPublished     int      `json:"repacks_published"`
	RepacksDetected      int      `json:"repacks_detected"`
	RepacksDelivered     int      `json:"repacks_delivered"`
	RepackDeliveredNames []string `json:"repack_delivered_names,omitempty"`
}

// Audit modes (Report.Mode).
const (
	ModeFull      = "full"
	ModeCatalogue = "catalogue"
)

// MarshalJSON adds "ok", the verdict of OK, to the report's fields.
func (r Report) MarshalJSON() ([]byte, error) {
	type fields Report // without this method
	return json.Marshal(struct {
		fields
		OK bool `json:"ok"`
	}{fields(r), r.OK()})
}

// OK reports whether the audit passed: the pipeline settled, nothing missing
// (per package and destination its routes require), nothing where no route
// sends it, nothing delivered
// twice, every corrupt archive catalogued with its listing error, every
// incomplete set a dead letter and never delivered, every package of a
// vanished send delivered later or a dead letter, the downloads within their
// budget; a package of a source that lost access or protects its content
// may instead be explained by the source's recorded access or its dead
// letters; no account ever ran in two sessions at once, nor made a
// request inside a flood wait Telegram asked of it; and every file
// posted from a directory met its manifest's expectation.
//
// With ModeCatalogue a package needs only its catalogue row: its
// deliveries may wait (DeliveryBacklog), and a vanished send may still be
// unresolved, but nothing may be delivered twice or where no route sends it.
func (r Report) OK() bool {
	if r.Mode == ModeCatalogue {
		return r.Settled && r.Missing == 0 && r.DuplicateDeliveries == 0 && r.RouteViolations == 0 && !r.DiskOverBudget &&
			r.SessionOverlaps == 0 && r.FloodWaitBreaches == 0 &&
			r.CataloguedPackages+r.LostUndelivered+r.ProtectedRecorded+r.CorruptDeadLettered >= r.UniquePackages &&
			r.RecordedInaccessible == r.InaccessibleSources &&
			r.CorruptListingErrors+r.CorruptDeadLettered == r.Corrupt && r.IncompleteDeadLettered == r.IncompleteSets &&
			r.IncompleteDelivered == 0 && r.PostDirWrong == 0 && r.RepacksDetected == r.RepacksPublished
	}
	return r.Settled && r.Missing == 0 && r.DuplicateDeliveries == 0 && r.RouteViolations == 0 && !r.DiskOverBudget &&
		r.SessionOverlaps == 0 && r.FloodWaitBreaches == 0 &&
		r.CataloguedPackages+r.LostUndelivered+r.ProtectedRecorded+r.CorruptDeadLettered >= r.UniquePackages &&
		r.RecordedInaccessible == r.InaccessibleSources &&
		r.CorruptListingErrors+r.CorruptDeadLettered == r.Corrupt && r.IncompleteDeadLettered == r.IncompleteSets &&
		r.IncompleteDelivered == 0 && r.VanishedUnresolved == 0 && r.PostDirWrong == 0 &&
		r.RepacksDetected == r.RepacksPublished && r.RepacksDelivered == 0
}
