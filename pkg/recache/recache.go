// Package recache compiles regular expressions once per distinct pattern and shares the
// result: profiles repeat the same few patterns for every job, and executors and
// watchers apply them on every start and poll. It owns compiling only.
package recache

import (
	"errors"
	"regexp"
	"sync"
)

// ErrEmpty is returned for an empty pattern: a profile that gives none.
var ErrEmpty = errors.New("recache: no pattern given")

// Cache holds compiled patterns. The zero value is ready; it is safe for concurrent use.
type Cache struct {
	mu sync.Mutex
	m  map[string]*regexp.Regexp
}

// Compile returns the compiled pattern, compiling it on first use.
func (c *Cache) Compile(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, ErrEmpty
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if re, ok := c.m[pattern]; ok {
		return re, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*regexp.Regexp{}
	}
	c.m[pattern] = re
	return re, nil
}
