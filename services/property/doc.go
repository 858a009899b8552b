// Package property serves the properties of DDS sessions to their running tasks. A task
// sets a property through the task-side API (HTTP, with the per-task credential the
// executor hands it); the set is checked against the task's own declaration (access and
// scope) and appended to its session's history as a property_set event. The live view is
// a KV bucket projected from those events (Bucket), rebuilt from the log like every
// projection (Rebuild, Compare); tasks read it and watch it for the properties they read,
// within their scope.
//
// It owns the task side of properties only: the events, their fold and the rules of
// access and scope are the events package's; the credentials' form and key are
// pkg/taskcred's; how a task learns its credential is the executor's.
package property
