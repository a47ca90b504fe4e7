"""What we ship: deploy/ manifests, the Dockerfiles and the image locks."""
