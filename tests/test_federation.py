"""The round loop: determinism, executor equivalence, exact bit counts, links, input validation."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from fedlib.algorithms import FedAvg, FedProx, Scaffold, make_algorithm
from fedlib.codecs.base import Identity, Message
from fedlib.codecs.uniform import UniformQuantizer
from fedlib.core.contracts import LAYER_COLUMNS, MODEL, SERVER
from fedlib.data import load_dataset
from fedlib.data.partition import dirichlet
from fedlib.engine.channel import Link
from fedlib.engine.federation import FederatedData, LocalTraining, make_sampler, run_federation
from fedlib.models import build_model, count_parameters


@pytest.fixture(scope="module")
def digits_data() -> FederatedData:
    ds = load_dataset("digits")
    parts = dirichlet(ds.y_train.numpy(), 8, 0.5, np.random.default_rng(0), min_size=20)
    return FederatedData(ds, parts)


def _mlp(data: FederatedData):
    return lambda: build_model("mlp", data.dataset.input_shape, 10, hidden=(32,))


def _run(data, algorithm=None, **kw):
    kw.setdefault("local", LocalTraining(lr=0.05, batch_size=16, epochs=1))
    kw.setdefault("sampler", 4)
    return run_federation(_mlp(data), data, algorithm or FedAvg(), kw.pop("rounds", 3), progress=False, **kw)


def _deterministic(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[c for c in frame.columns if c.endswith("_s")])


@pytest.mark.parametrize("executor", ["sequential", "vmap"])
def test_same_seed_same_record_bitwise(digits_data, executor):
    a = _run(digits_data, Scaffold(), seed=7, executor=executor)
    b = _run(digits_data, Scaffold(), seed=7, executor=executor)
    pd.testing.assert_frame_equal(_deterministic(a.rounds), _deterministic(b.rounds), check_exact=True)
    pd.testing.assert_frame_equal(a.clients, b.clients, check_exact=True)
    for k in a.params:
        assert torch.equal(a.params[k], b.params[k])


def test_different_seeds_differ(digits_data):
    a = _run(digits_data, seed=1)
    b = _run(digits_data, seed=2)
    assert not torch.equal(a.params["layers.0.weight"], b.params["layers.0.weight"])
    assert not a.clients["client"].equals(b.clients["client"])  # client sampling differs too


@pytest.mark.parametrize("algorithm", [FedAvg(), FedProx(mu=0.1), Scaffold()], ids=lambda a: a.name)
def test_vmap_executor_matches_sequential(digits_data, algorithm):
    """Same batches, same arithmetic up to float reassociation: agreement to 1e-5 after 3 rounds."""
    local = LocalTraining(lr=0.05, batch_size=16, epochs=1, momentum=0.5, weight_decay=1e-4)
    seq = _run(digits_data, algorithm, local=local, seed=3, executor="sequential")
    vec = _run(digits_data, algorithm, local=local, seed=3, executor="vmap")
    for k in seq.params:
        torch.testing.assert_close(vec.params[k], seq.params[k], atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(vec.clients["loss"], seq.clients["loss"], rtol=1e-4)


def test_vmap_executor_matches_sequential_for_a_cnn():
    ds = load_dataset("digits")
    parts = dirichlet(ds.y_train.numpy(), 4, 1.0, np.random.default_rng(1), min_size=20)
    data = FederatedData(ds, parts)
    kw = dict(local=LocalTraining(lr=0.05, batch_size=32, steps=5, epochs=None), sampler=1.0, seed=0, progress=False)
    seq = run_federation(lambda: build_model("cnn", ds.input_shape, 10), data, FedAvg(), 2, **kw)
    vec = run_federation(lambda: build_model("cnn", ds.input_shape, 10), data, FedAvg(), 2, executor="vmap", **kw)
    for k in seq.params:  # convolutions reassociate more under vmap: looser tolerance (anchors.md section 4.2)
        torch.testing.assert_close(vec.params[k], seq.params[k], atol=1e-4, rtol=1e-3)


def test_identity_links_count_32_bits_per_value(digits_data):
    res = _run(digits_data, Scaffold(), rounds=2)
    d = count_parameters(_mlp(digits_data)())
    assert (res.clients["bits_up"] == 32 * d).all()
    assert (res.clients["bits_up_extra"] == 32 * d).all()  # SCAFFOLD's delta c_i
    assert (res.rounds["bits_down"] == 32 * d).all()
    assert (res.rounds["bits_down_extra"] == 32 * d).all()  # the server's c
    assert (res.rounds["bits_up"] == 4 * 32 * d).all()
    assert (res.rounds["receivers"] == 4).all()


def test_all_receivers_counts_every_client(digits_data):
    res = _run(digits_data, downlink_receivers="all", rounds=1)
    assert res.rounds["receivers"].iloc[0] == digits_data.num_clients


def test_weights_and_update_payloads_agree_for_identity(digits_data):
    up = _run(digits_data, uplink=Link(payload="update"), seed=5)
    wt = _run(digits_data, uplink=Link(payload="weights"), seed=5)
    for k in up.params:
        torch.testing.assert_close(up.params[k], wt.params[k], atol=1e-6, rtol=0)


class HalfSignCodec:
    """A lossy toy codec: keeps sign * mean|x|; 1 bit per value + one float."""

    name = "sign"

    def encode(self, x, gen=None):
        return Message(payload=(torch.sign(x), x.abs().mean()), shape=x.shape, payload_bits=x.numel(), side_bits=32)

    def decode(self, msg):
        sign, scale = msg.payload
        return sign * scale


def test_error_feedback_keeps_the_residual(digits_data):
    """With error feedback, the sum of what was decoded plus the final residual equals the sum sent."""
    res_plain = _run(digits_data, uplink=Link(codec=HalfSignCodec()), sampler=1.0, rounds=2, seed=1)
    res_ef = _run(digits_data, uplink=Link(codec=HalfSignCodec(), error_feedback=True), sampler=1.0, rounds=2, seed=1)
    d = count_parameters(_mlp(digits_data)())
    assert (res_ef.clients["bits_up"] == d + 32 * 4).all()  # 4 tensors (2 weights, 2 biases), one float each
    assert not torch.equal(res_plain.params["layers.0.weight"], res_ef.params["layers.0.weight"])


def test_per_client_codec_policy(digits_data):
    policy = lambda ctx: HalfSignCodec() if ctx.client % 2 else Identity()  # noqa: E731
    res = _run(digits_data, uplink=Link(codec=policy), sampler=1.0, rounds=1)
    odd = res.clients["client"] % 2 == 1
    assert (res.clients.loc[odd, "codec"] == "sign").all()
    assert (res.clients.loc[~odd, "codec"] == "fp32").all()


def test_downlink_update_payload_without_feedback_adopts_decoded_model(digits_data):
    """Everyone holds the decoded model: between rounds the reported model moves by exactly one decoded
    sign message per layer (values -s, 0 or s), and that model is the one evaluated."""
    down = Link(codec=HalfSignCodec(), payload="update")
    one, two = (_run(digits_data, downlink=down, rounds=r, seed=2) for r in (1, 2))
    d = count_parameters(_mlp(digits_data)())
    assert (two.rounds["bits_down"] == d + 32 * 4).all()  # one message per round; the shared init needs none
    for k in two.params:
        step = (two.params[k] - one.params[k]).abs()
        assert len(torch.unique(step[step > 0].round(decimals=6))) == 1


def test_downlink_update_payload_with_feedback_keeps_the_server_model(digits_data):
    """With error feedback the server's model is the uncompressed aggregate, so the first round matches an
    uncompressed run exactly (the first round's clients start from the shared initial model)."""
    ef = _run(digits_data, downlink=Link(codec=HalfSignCodec(), payload="update", error_feedback=True), rounds=1, seed=2)
    plain = _run(digits_data, rounds=1, seed=2)
    for k in plain.params:
        assert torch.equal(ef.params[k], plain.params[k])


def test_training_learns(digits_data):
    res = _run(digits_data, rounds=8, sampler=1.0, local=LocalTraining(lr=0.1, batch_size=16, epochs=2))
    assert res.rounds["test_acc"].iloc[-1] > 0.85


def test_post_aggregation_hook_sees_the_round(digits_data):
    seen = []

    def hook(params, info):
        seen.append((info.ctx.round, info.ctx.num_clients, len(info.results), float(info.weights.sum())))
        return {k: v * 0 for k, v in params.items()}, {"zeroed": 1.0}

    res = _run(digits_data, hooks=[hook], rounds=2)
    assert seen == [(0, 8, 4, pytest.approx(1.0)), (1, 8, 4, pytest.approx(1.0))]
    assert (res.rounds["zeroed"] == 1.0).all()
    assert all(float(v.abs().sum()) == 0 for v in res.params.values())


@pytest.mark.parametrize("granularity", ["layer", "model"])
def test_codec_info_and_per_layer_hook_diagnostics_are_rows_of_the_layer_table(digits_data, granularity):
    """Uplink codec info: one row per (round, client, layer, key) with the sender's id; downlink codec info and a
    hook's {layer: value} diagnostics: client SERVER, the downlink's keys "down/<key>"; a model-granularity link's
    one layer is MODEL. Scalar diagnostics stay columns of the rounds; no "key/layer" column is left anywhere."""
    def hook(params, info):
        return params, {"norm": {k: float(v.norm()) for k, v in params.items()}, "scalar": 2.0}

    link = Link(UniformQuantizer(4), granularity=granularity)
    res = _run(digits_data, uplink=link, downlink=Link(UniformQuantizer(8), granularity=granularity, payload="weights"),
               hooks=[hook], rounds=2)
    names = list(res.params) if granularity == "layer" else [MODEL]
    layers = res.layers
    assert layers.dtypes.map(str).to_dict() == LAYER_COLUMNS and layers.columns.tolist() == list(LAYER_COLUMNS)
    info_keys = set(UniformQuantizer(4).encode(torch.ones(3)).info)
    up = layers[layers["client"] != SERVER]
    assert set(up["key"]) == info_keys and set(up["layer"]) == set(names)
    assert up.groupby(["round", "client"]).size().tolist() == [len(info_keys) * len(names)] * len(res.clients)
    assert sorted(set(zip(up["round"], up["client"]))) == sorted(zip(res.clients["round"], res.clients["client"]))
    bits = up[up["key"] == "bits_per_value"]
    assert (bits["value"] == 4).all()
    down = layers[(layers["client"] == SERVER) & layers["key"].str.startswith("down/")]
    assert set(down["key"]) == {f"down/{k}" for k in info_keys} and set(down["layer"]) == set(names)
    assert (down.loc[down["key"] == "down/bits_per_value", "value"] == 8).all()
    norms = layers[layers["key"] == "norm"]
    assert (norms["client"] == SERVER).all() and norms.groupby("round")["layer"].apply(list).tolist() == [list(res.params)] * 2
    final = norms[norms["round"] == 2].set_index("layer")["value"]
    assert final.to_dict() == pytest.approx({k: float(v.norm()) for k, v in res.params.items()})
    assert (res.rounds["scalar"] == 2.0).all()
    assert not [c for frame in (res.rounds, res.clients) for c in frame.columns if "/" in c]


def test_a_run_without_per_layer_diagnostics_has_an_empty_typed_layer_table(digits_data):
    res = _run(digits_data, rounds=1)  # fp32 links record no codec info, no hook
    assert res.layers.empty and res.layers.dtypes.map(str).to_dict() == LAYER_COLUMNS


@pytest.mark.parametrize("bad", [{"fc": "big"}, {0: 1.0}, {"fc": True}, {"fc": None}])
def test_a_per_layer_diagnostic_must_map_layer_names_to_numbers(digits_data, bad):
    with pytest.raises(ValueError, match="hook .* returned diagnostic 'odd' with entry .*layer names .str. to numbers"):
        _run(digits_data, hooks=[lambda params, info: (params, {"odd": bad})], rounds=1)


def test_local_schedule_epochs_and_steps():
    rng = np.random.default_rng(0)
    batches = LocalTraining(batch_size=4, epochs=2).schedule(10, rng)
    assert [len(b) for b in batches] == [4, 4, 2, 4, 4, 2]
    assert sorted(np.concatenate(batches[:3])) == list(range(10))
    assert len(LocalTraining(batch_size=4, epochs=None, steps=7).schedule(10, rng)) == 7
    assert len(LocalTraining(batch_size=4, steps=7).schedule(10, rng)) == 7  # steps alone
    assert LocalTraining().epochs == 1.0
    assert len(LocalTraining(batch_size=4, epochs=0.5).schedule(10, rng)) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(epochs=1, steps=3), "epochs or steps, not both"),
        (dict(batch_size=0), "batch_size must be >= 1"),
        (dict(batch_size=2.5), "batch_size must be an integer"),
        (dict(steps=2.5), "steps must be an integer"),
        (dict(lr=-1.0), "lr must be a finite number"),
        (dict(lr=float("nan")), "lr must be a finite number"),
        (dict(lr=float("inf")), "lr must be a finite number"),
        (dict(lr="0.1"), "lr must be a real number"),
        (dict(momentum=1.0), "momentum"),
        (dict(weight_decay=-1), "weight_decay"),
        (dict(epochs=float("nan")), "epochs"),
    ],
)
def test_local_training_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LocalTraining(**kwargs)


def test_bad_inputs_raise_clear_errors(digits_data):
    with pytest.raises(ValueError, match="unknown algorithm 'fedsgdx'; available"):
        make_algorithm("fedsgdx")
    with pytest.raises(ValueError, match="cannot sample 99 clients"):
        make_sampler(99, 8)
    with pytest.raises(ValueError, match="fraction"):
        make_sampler(1.5, 8)
    with pytest.raises(ValueError, match="executor"):
        _run(digits_data, executor="threads")
    with pytest.raises(ValueError, match="threads"):
        _run(digits_data, threads=0)
    with pytest.raises(ValueError, match="rounds"):
        _run(digits_data, rounds=0)
    with pytest.raises(ValueError, match="no samples"):
        FederatedData(digits_data.dataset, [np.array([0, 1]), np.array([], dtype=int)])
    with pytest.raises(ValueError, match="mu"):
        FedProx(mu=-1)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            _run(digits_data, device="cuda")


def test_auto_device_runs_and_matches_cpu(digits_data):
    auto = _run(digits_data, device="auto", seed=4)
    cpu = _run(digits_data, device="cpu", seed=4)
    assert auto.config["device"] in ("cpu", "cuda")
    if auto.config["device"] == "cpu":
        assert torch.equal(auto.params["layers.0.weight"], cpu.params["layers.0.weight"])


def test_auto_picks_the_measured_executor_and_threads(digits_data):
    from fedlib.algorithms import Algorithm
    from fedlib.engine.federation import DEFAULT_THREADS, choose_executor, choose_threads

    class PerStep(Algorithm):
        vmap_compatible = False

    mlp, cnn = _mlp(digits_data)(), build_model("cnn", digits_data.dataset.input_shape, 10)
    cpu, cuda, plain = torch.device("cpu"), torch.device("cuda"), LocalTraining()
    assert (choose_executor(mlp, FedAvg(), cpu, plain), choose_threads(mlp)) == ("sequential", 1)
    assert (choose_executor(cnn, FedAvg(), cpu, plain), choose_threads(cnn)) == ("sequential", DEFAULT_THREADS)
    assert choose_executor(mlp, FedAvg(), cuda, plain) == choose_executor(cnn, FedAvg(), cuda, plain) == "graph"
    assert choose_executor(cnn, FedAvg(), cuda, LocalTraining(augment="crop_flip")) == "vmap"
    assert choose_executor(mlp, FedProx(mu=0.1), cuda, plain) == "vmap"  # a corrected step stays uncaptured
    assert choose_executor(mlp, PerStep(), cuda, plain) == "sequential"
    res = _run(digits_data, rounds=1)
    assert (res.config["executor"], res.config["threads"]) == ("sequential", 1)


def test_sampler_draws_distinct_sorted_clients():
    sample = make_sampler(3, 10)
    ids = sample(0, 10, np.random.default_rng(0))
    assert len(set(ids)) == 3 and list(ids) == sorted(ids)
    assert list(make_sampler(1.0, 5)(0, 5, np.random.default_rng(0))) == [0, 1, 2, 3, 4]
