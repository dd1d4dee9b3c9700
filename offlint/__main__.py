from offlint.cli import main

main()
