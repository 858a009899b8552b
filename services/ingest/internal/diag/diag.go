// Package diag collects the problems a parser finds in one document, each at a position
// and naming the field, so a submitter sees every mistake at once. It knows nothing of
// files or formats; the ingest package adds the file name.
package diag

import "fmt"

// Problem is one thing wrong, at a 1-based line and column (in bytes).
type Problem struct {
	Line  int
	Col   int
	Field string
	What  string
}

// List gathers problems in the order found.
type List struct{ Problems []Problem }

// Add records a problem.
func (l *List) Add(line, col int, field, what string) {
	l.Problems = append(l.Problems, Problem{Line: line, Col: col, Field: field, What: what})
}

// Addf records a problem with a formatted description.
func (l *List) Addf(line, col int, field, format string, args ...any) {
	l.Add(line, col, field, fmt.Sprintf(format, args...))
}

// Empty reports whether nothing was recorded.
func (l *List) Empty() bool { return len(l.Problems) == 0 }
