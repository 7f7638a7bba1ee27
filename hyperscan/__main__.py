"""`python -m hyperscan` = the `hyperscan` command (used to start local workers)."""

from hyperscan.cli import main

main()
