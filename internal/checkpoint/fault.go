package checkpoint

// Fault is a test hook: Save, Prune and WriteFiles call it at each phase of their work (the
// Phase* names), so that a test can stop a real run there, e.g. with SIGKILL, and check what a
// crash at that point leaves. It does nothing otherwise (one call of an empty function per
// phase); only tests set it, before the run starts.
var Fault = func(phase string) {}

// The phases Fault is called at, in the order they happen.
const (
	// Save: the temporary .checkpoint-N.tmp-XXXX was created; one file of the checkpoint was
	// written into it (once per file, in name order); trainer_state.json was written; everything
	// under it was fsynced; it was renamed to checkpoint-N (before OUTPUT_DIR is fsynced).
	PhaseSaveTempCreated  = "save-temp-created"
	PhaseSaveFileWritten  = "save-file-written"
	PhaseSaveStateWritten = "save-state-written"
	PhaseSaveSynced       = "save-synced"
	PhaseSaveRenamed      = "save-renamed"
	// Replacing an existing directory (a checkpoint-N saved again, a model file that is a
	// directory): the old one was moved aside to .checkpoint-N.tmp-XXXX.old and the new one is
	// not yet renamed into place.
	PhaseReplaceMovedAside = "replace-moved-aside"
	// Prune (save_total_limit): a checkpoint was renamed to .deleting-checkpoint-N (and OUTPUT_DIR
	// fsynced); then it was deleted.
	PhasePruneRenamed = "prune-renamed"
	PhasePruneDeleted = "prune-deleted"
	// WriteFiles (the final model in OUTPUT_DIR): a file's temporary was written and fsynced
	// (once per file); the incomplete-model marker was written (before the first rename); a file
	// was renamed into place (once per file); the marker was removed after the last rename.
	PhaseModelTempWritten = "model-temp-written"
	PhaseModelMarked      = "model-marked"
	PhaseModelRenamed     = "model-renamed"
	PhaseModelUnmarked    = "model-unmarked"
)

// Phases lists every phase Fault is called at.
var Phases = []string{
	PhaseSaveTempCreated, PhaseSaveFileWritten, PhaseSaveStateWritten, PhaseSaveSynced, PhaseSaveRenamed,
	PhaseReplaceMovedAside, PhasePruneRenamed, PhasePruneDeleted,
	PhaseModelTempWritten, PhaseModelMarked, PhaseModelRenamed, PhaseModelUnmarked,
}
