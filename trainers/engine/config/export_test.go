package config

// The options of a configuration and one of them by key, for the external tests.
var (
	Fields = fields
	Lookup = lookup
)
