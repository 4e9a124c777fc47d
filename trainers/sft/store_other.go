//go:build !unix

package sft

import (
	"errors"
	"os"
)

const canMap = false

func mapFile(*os.File, int64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmap([]byte) {}
