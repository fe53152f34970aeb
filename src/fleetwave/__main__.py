from fleetwave.cli import main

main()
