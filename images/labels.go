package images

// The labels a scaffold image carries: the track's [scaffold] pin is checked against them.
const (
	LabelScaffoldName   = "dev.sealrun.scaffold.name"
	LabelScaffoldVer    = "dev.sealrun.scaffold.version"
	LabelScaffoldConfig = "dev.sealrun.scaffold.config_sha256"
)
