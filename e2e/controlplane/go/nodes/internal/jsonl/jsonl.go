// Package jsonl appends records as JSON lines to a file that several processes share (every fake
// runtime of a row writes the same CDI log): each record is one write(2) of one line to a file
// opened with O_APPEND, so lines from different processes never interleave.
package jsonl

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// Writer appends JSON lines to one file.
type Writer struct {
	mu   sync.Mutex
	file *os.File
}

// Open opens (creating it if needed) the file at path for appending.
func Open(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{file: f}, nil
}

// Append writes v as one JSON line.
func (w *Writer) Append(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode a log record: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("append to %s: %w", w.file.Name(), err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.file.Close() }

// Touch creates an empty file at path: the commands' "I am ready" signal to the launcher, which
// polls for it.
func Touch(path string) error {
	if path == "" {
		return nil
	}
	return os.WriteFile(path, nil, 0o644)
}
