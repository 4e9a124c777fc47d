package chat

import (
	"fmt"
	"io"

	"github.com/nikolalohinski/gonja/v2/loaders"
)

// nilLoader refuses {% include %} and {% import %}: a chat template is one self-contained string.
type nilLoader struct{}

func (nilLoader) Read(path string) (io.Reader, error) {
	return nil, fmt.Errorf("chat templates cannot include other files (%s)", path)
}
func (nilLoader) Resolve(path string) (string, error)           { return path, nil }
func (l nilLoader) Inherit(from string) (loaders.Loader, error) { return l, nil }
