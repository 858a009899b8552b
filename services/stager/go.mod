module github.com/gridwire/gridwire/services/stager

go 1.26.8

require (
	github.com/gridwire/gridwire/events v0.0.0
	github.com/gridwire/gridwire/pkg v0.0.0
)

replace github.com/gridwire/gridwire/events => ../../events

replace github.com/gridwire/gridwire/pkg => ../../pkg
