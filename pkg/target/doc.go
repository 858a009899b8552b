// Package target is what gridwire runs on a target host, shared by the executor (which
// starts and controls jobs there) and the watcher (which observes them): shells that run
// scripts on this host (Local) or on a remote one over a pooled, host-key-checked SSH
// connection (SSH), the SSH login a cluster's config names (Login, NewPool), the install
// of a profile's static scripts where its scripts expect them (InstallScript), and the
// reading of the one-line files a job's processes leave beside it, its exit status among
// them (ReadLine, ReadExitStatus).
//
// It knows nothing of events, jobs or profiles: callers hand it paths, script bodies and
// variables. What a script says and when it runs belong to the executor and the watcher;
// SSH transport and host keys to pkg/sshx; quoting to pkg/shellquote.
package target
