import sys

from ragkit.cli.main import main

sys.exit(main())
