import sys

from finetune.job.worker import main

sys.exit(main())
