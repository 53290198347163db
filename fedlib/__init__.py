"""fedlib: a compact federated-learning library for the FedShift, TACO, FedAQ and MUCSC companions."""
from fedlib.algorithms import make_algorithm
from fedlib.channel import Link, LinkContext
from fedlib.data import Dataset, load_dataset
from fedlib.federation import FederatedData, LocalTraining, RunResult, run_federation
from fedlib.models import build_model
from fedlib.seeding import Seeds
from fedlib.trust import ImportNotAllowedError, allow_imports

__version__ = "0.1.0"

__all__ = [
    "Dataset", "FederatedData", "ImportNotAllowedError", "Link", "LinkContext", "LocalTraining", "RunResult", "Seeds",
    "allow_imports", "build_model", "load_dataset", "make_algorithm", "run_federation",
]
