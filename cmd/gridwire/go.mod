module github.com/gridwire/gridwire/cmd/gridwire

go 1.26.8

require (
	github.com/gridwire/gridwire/events v0.0.0
	github.com/gridwire/gridwire/pkg v0.0.0
	github.com/gridwire/gridwire/services/executor v0.0.0
	github.com/gridwire/gridwire/services/incarnator v0.0.0
	github.com/gridwire/gridwire/services/ingest v0.0.0
	github.com/gridwire/gridwire/services/property v0.0.0
	github.com/gridwire/gridwire/services/readside v0.0.0
	github.com/gridwire/gridwire/services/stager v0.0.0
	github.com/gridwire/gridwire/services/watcher v0.0.0
	github.com/nats-io/nats.go v1.55.0
	github.com/prometheus/client_golang v1.25.0
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/crypto v0.58.0
	golang.org/x/sync v0.24.0
	golang.org/x/term v0.47.0
)

require (
	github.com/antithesishq/antithesis-sdk-go v0.8.0-default-no-op // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudevents/sdk-go/v2 v2.16.2 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/kr/fs v0.1.0 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/jwt/v2 v2.8.2 // indirect
	github.com/nats-io/nats-server/v2 v2.15.2 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/oklog/ulid/v2 v2.1.2 // indirect
	github.com/pkg/sftp v1.13.12 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/gridwire/gridwire/events => ../../events

replace github.com/gridwire/gridwire/pkg => ../../pkg

replace github.com/gridwire/gridwire/services/ingest => ../../services/ingest

replace github.com/gridwire/gridwire/services/incarnator => ../../services/incarnator

replace github.com/gridwire/gridwire/services/executor => ../../services/executor

replace github.com/gridwire/gridwire/services/stager => ../../services/stager

replace github.com/gridwire/gridwire/services/watcher => ../../services/watcher

replace github.com/gridwire/gridwire/services/readside => ../../services/readside

replace github.com/gridwire/gridwire/services/property => ../../services/property
