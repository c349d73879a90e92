from .lean_start import main

main()
