from koinii.cli import main

main()
