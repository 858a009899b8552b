module github.com/gridwire/gridwire/cmd/gridwire

go 1.26.8

require (
	github.com/gridwire/gridwire/events v0.0.0
	github.com/gridwire/gridwire/pkg v0.0.0
	github.com/gridwire/gridwire/services/executor v0.0.0
	github.com/gridwire/gridwire/services/incarnator v0.0.0
	github.com/gridwire/gridwire/services/ingest v0.0.0
	github.com/gridwire/gridwire/services/stager v0.0.0
	github.com/gridwire/gridwire/services/watcher v0.0.0
)

replace github.com/gridwire/gridwire/events => ../../events

replace github.com/gridwire/gridwire/pkg => ../../pkg

replace github.com/gridwire/gridwire/services/ingest => ../../services/ingest

replace github.com/gridwire/gridwire/services/incarnator => ../../services/incarnator

replace github.com/gridwire/gridwire/services/executor => ../../services/executor

replace github.com/gridwire/gridwire/services/stager => ../../services/stager

replace github.com/gridwire/gridwire/services/watcher => ../../services/watcher
