"""Cards in the Hub's format: a model card in every job's adapter directory, a dataset card in every fix set, and
`push_to_hub` for both (workbench/cards/model.py, dataset.py, hub.py). Views of the records, never a source."""

from workbench.cards._files import FIXSET_FILE, JOB_FILE, RESULT_FILE
from workbench.cards.dataset import card_of, dataset_card, write_dataset_card
from workbench.cards.hub import push_to_hub
from workbench.cards.model import is_job_adapter, model_card, refresh_for_run, write_model_card

__all__ = ["FIXSET_FILE", "JOB_FILE", "RESULT_FILE",  # a job folder's record files, named once (cards/_files.py)
           "card_of", "dataset_card", "is_job_adapter", "model_card", "push_to_hub", "refresh_for_run",
           "write_dataset_card", "write_model_card"]
