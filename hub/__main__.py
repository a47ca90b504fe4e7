"""`python -m hub`: run the hub (same as `wingsmith hub`)."""

from hub.app import main

main()
