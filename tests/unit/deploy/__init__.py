"""What we ship: deploy/ manifests, the Dockerfiles and the runtime lock file."""
