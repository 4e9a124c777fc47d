//go:build noxla

package backend

const xlaCompiled = false
