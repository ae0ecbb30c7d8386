// Package deploy holds no code. Its tests check the files beside it against what they
// configure: the Kubernetes manifests against the Kubernetes API types, the monitoring
// rules and dashboard against the metrics a running daemon exports, and every command
// line and TMEND_ variable in the manifests, Dockerfiles and systemd units against the
// built binary.
package deploy
