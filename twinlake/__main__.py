from twinlake.cli import main

main()
