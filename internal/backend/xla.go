//go:build !noxla

package backend

import _ "github.com/gomlx/gomlx/backends/xla" // registers "xla" (cgo; the PJRT plugin is dlopen-ed at run time)

const xlaCompiled = true
