from tabletopic.cli import main

main()
