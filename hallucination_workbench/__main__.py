import sys

from hallucination_workbench import main

sys.exit(main())
