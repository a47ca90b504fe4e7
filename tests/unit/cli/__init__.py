"""The CLI's pure parts: output formatting, manifest files, arguments, token lookup."""
