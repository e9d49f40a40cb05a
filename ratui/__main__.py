import sys

from ratui.cli import main

sys.exit(main())
