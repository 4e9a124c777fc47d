package chat

import (
	"fmt"
	"io"
	"strings"

	"github.com/nikolalohinski/gonja/v2/loaders"
)

// nilLoader refuses {% include %} and {% import %}: a chat template is one self-contained string.
type nilLoader struct{}

func (nilLoader) Read(path string) (io.Reader, error) {
	return nil, fmt.Errorf("chat templates cannot include other files (%s)", path)
}
func (nilLoader) Resolve(path string) (string, error)           { return path, nil }
func (l nilLoader) Inherit(from string) (loaders.Loader, error) { return l, nil }

// rootLoader gives Parse the template's own source once; any later read (the template's
// {% extends %}, {% include %} or {% import %} of itself, which gonja would follow without end)
// and every other name is refused as nilLoader refuses them.
type rootLoader struct {
	id, src string
	read    bool
}

func (l *rootLoader) Read(path string) (io.Reader, error) {
	if path != l.id || l.read {
		return nilLoader{}.Read(path)
	}
	l.read = true
	return strings.NewReader(l.src), nil
}
func (l *rootLoader) Resolve(path string) (string, error)    { return path, nil }
func (l *rootLoader) Inherit(string) (loaders.Loader, error) { return l, nil }
