//go:build !(linux || darwin)

package safetensors

func mapFile(path string) ([]byte, func() error, error) { return readAll(path) }
