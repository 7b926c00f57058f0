# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Analysis tools: head sharing and load from hand-set selector logits, heatmaps, and selection stability from
hand-written logs."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from hf_headsel import analysis
from hf_headsel.analysis import (
    ComponentAnalysis,
    SelectionSnapshot,
    analyze_model,
    changed_heads,
    head_load,
    head_load_figure,
    head_sharing_figure,
    head_sharing_matrix,
    plot_head_sharing,
    plot_selection_stability,
    read_selection_log,
    selection_snapshot,
    selection_stability,
    selection_stability_figure,
    write_analysis,
)

from conftest import HEADS, LAYERS, randomize_selector_logits, run_without_hf_headsel

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Encoder tasks en, de; group strategy, H = 4, H' = 8: group g holds candidates {g, g + 4}.
# layer 0: en takes 0 1 2 3, de takes 0 1 6 7 (2 of 4 shared); layer 1: both take 4 1 2 7 (4 of 4 shared).
ENCODER_CHOICE = {
    0: [[0, 1, 2, 3], [4, 1, 2, 7]],
    1: [[0, 1, 6, 7], [4, 1, 2, 7]],
}


def set_choice(model, component: str, choice: dict[int, list[list[int]]]) -> None:
    """Set `phi` so that task t selects `choice[t][layer]` (logit 1 for the chosen candidates, 0 elsewhere)."""
    logits = model.head_selection[component].logits
    with torch.no_grad():
        logits.zero_()
        for task, layers in choice.items():
            for layer, heads in enumerate(layers):
                logits[task, layer, heads] = 1.0


def test_sharing_and_load_of_hand_set_logits(marian):
    model = marian.model(head_selection_components=["encoder_self"], total_encoder_attention_heads=2 * HEADS)
    set_choice(model, "encoder_self", ENCODER_CHOICE)
    result = analyze_model(model)["encoder_self"]

    assert result.tasks == ["en", "de"]
    assert result.selected.tolist() == [ENCODER_CHOICE[0], ENCODER_CHOICE[1]]
    np.testing.assert_allclose(result.sharing, [[1.0, 0.75], [0.75, 1.0]])  # (2/4 + 4/4) / 2
    assert result.load.tolist() == [
        [2, 2, 1, 1, 0, 0, 1, 1],  # layer 0
        [0, 2, 2, 0, 2, 0, 0, 2],  # layer 1
    ]
    summary = result.summary()
    assert summary["mean_sharing_between_tasks"] == pytest.approx(0.75)
    assert summary["unused_heads_per_layer"] == [2, 4] and summary["unused_heads"] == 6
    assert summary["max_load"] == 2


def test_sharing_matches_set_intersections_for_subset_strategy(marian):
    """Subset strategy, random logits, 3 decoder tasks: every entry equals the set arithmetic done by hand."""
    model = marian.model(head_selection_strategy="subset", head_selection_components=["decoder_self"],
                         total_decoder_attention_heads=7)
    randomize_selector_logits(model)
    selected = model.selected_heads()["decoder_self"]
    sharing = head_sharing_matrix(selected, 7)
    for i, j in itertools.product(range(3), repeat=2):
        expected = np.mean([len(set(selected[i, l].tolist()) & set(selected[j, l].tolist())) / HEADS
                            for l in range(LAYERS)])
        assert sharing[i, j] == pytest.approx(expected)
    load = head_load(selected, 7)
    assert load.shape == (LAYERS, 7) and (load.sum(axis=1) == 3 * HEADS).all()


def test_pair_keyed_cross_attention_labels(marian):
    model = marian.model(head_selection_strategy="group", head_selection_components=["decoder_cross"],
                         cross_attention_task_key="pair")
    result = analyze_model(model)["decoder_cross"]
    assert result.tasks == [f"{e}→{d}" for e in ["en", "de"] for d in ["de", "fr", "it"]]
    assert result.sharing.shape == (6, 6)
    np.testing.assert_allclose(np.diag(result.sharing), 1.0)


def test_analysis_rejects_what_it_cannot_read(marian, tmp_path):
    with pytest.raises(ValueError, match="not a head-selection model"):
        analyze_model(marian.stock_model())
    marian.stock_model().save_pretrained(tmp_path / "stock")
    with pytest.raises(ValueError, match="not a head-selection model"):
        analyze_model(tmp_path / "stock")
    with pytest.raises(ValueError, match=r"candidate indices in \[0, 4\)"):
        head_load(torch.tensor([[[0, 5]]]), 4)


def test_sharing_and_load_take_arrays_and_lists_and_refuse_bad_selections():
    selected = [[[0, 1], [2, 3]], [[0, 2], [2, 3]]]  # ComponentAnalysis.selected is a numpy array
    expected = head_sharing_matrix(torch.tensor(selected), 4)
    np.testing.assert_allclose(head_sharing_matrix(np.array(selected), 4), expected)
    np.testing.assert_allclose(head_sharing_matrix(selected, 4), [[1.0, 0.75], [0.75, 1.0]])
    assert head_load(np.array(selected), 4).tolist() == [[2, 1, 1, 0], [0, 0, 2, 2]]
    with pytest.raises(ValueError, match=r"shape \[tasks, layers, H\], got \(\)"):
        head_sharing_matrix(torch.tensor(3), 4)
    with pytest.raises(ValueError, match="task 0, layer 0 lists head 0 twice"):  # would give a diagonal of 0.5
        head_sharing_matrix(torch.tensor([[[0, 0]], [[0, 1]]]), 4)
    with pytest.raises(ValueError, match="must be integer candidate indices"):
        head_load(np.array([[[0.0, 1.5]]]), 4)


def test_analysis_reads_base_compiled_and_remote_code_models(marian):
    """Anything with selectors and selected_heads() is read, whatever its class: a base model (no LM head) and a
    torch.compile'd model here, the remote-code classes in the next test."""
    model = marian.model(head_selection_components=["encoder_self"], total_encoder_attention_heads=2 * HEADS)
    set_choice(model, "encoder_self", ENCODER_CHOICE)
    base = marian.base_model_class(model.config).eval()
    base.head_selection.load_state_dict(model.head_selection.state_dict())
    for candidate in (base, torch.compile(model)):
        result = analyze_model(candidate)["encoder_self"]
        assert result.selected.tolist() == [ENCODER_CHOICE[0], ENCODER_CHOICE[1]]


def test_analysis_reads_a_saved_causal_lm_folder_with_its_own_class(marian, tmp_path):
    # its folder loads through AutoModelForCausalLM: the translation class would load the decoder only in part
    model = marian.causal_lm_class(marian.config(head_selection_components=["decoder_self", "decoder_cross"])).eval()
    randomize_selector_logits(model)
    model.save_pretrained(tmp_path / "lm")
    assert type(analysis.load_headsel_model(tmp_path / "lm")) is marian.causal_lm_class
    results = analyze_model(tmp_path / "lm")
    assert set(results) == {"decoder_self", "decoder_cross"}
    for component, heads in model.selected_heads().items():
        assert results[component].selected.tolist() == heads.tolist(), component


REMOTE_THEN_ANALYZE = """
    import json
    import sys

    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True)  # before hf_headsel
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, Blocker)]
    from hf_headsel.analysis import analyze_model

    result = analyze_model(model)["encoder_self"]
    print(json.dumps({"module": type(model).__module__, "selected": result.selected.tolist()}))
"""


def test_analysis_reads_a_model_loaded_with_remote_code_before_hf_headsel(marian, tmp_path):
    model = marian.model(head_selection_components=["encoder_self"], total_encoder_attention_heads=2 * HEADS)
    set_choice(model, "encoder_self", ENCODER_CHOICE)
    model.save_pretrained(tmp_path / "model")
    result = run_without_hf_headsel(REMOTE_THEN_ANALYZE, [str(tmp_path / "model")], tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["module"].startswith("transformers_modules"), out["module"]
    assert out["selected"] == [ENCODER_CHOICE[0], ENCODER_CHOICE[1]]


def test_analysis_refuses_what_is_neither_a_model_nor_a_saved_folder(marian, tmp_path):
    with pytest.raises(ValueError, match="expected a head-selection model or a saved model folder, got int"):
        analyze_model(123)
    with pytest.raises(ValueError, match="is neither a saved model folder nor a Hub model id this machine can load"):
        analyze_model(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"a list of component names, not a string: pass \['encoder_self'\]"):
        write_analysis(marian.model(), tmp_path / "out", components="encoder_self")


def test_write_analysis_from_saved_folder_writes_pngs_and_json(family, tmp_path):
    model = family.model(head_selection_components=["encoder_self", "decoder_cross"])
    randomize_selector_logits(model)
    model.save_pretrained(tmp_path / "model")
    result = write_analysis(tmp_path / "model", tmp_path / "out")

    expected = {f"head_{kind}_{c}.png" for kind in ("sharing", "load") for c in ("encoder_self", "decoder_cross")}
    assert set(result["figures"]) == expected
    for name in expected:
        data = (tmp_path / "out" / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
    saved = json.loads((tmp_path / "out/analysis.json").read_text())
    assert saved["stability"] is None  # no log in the folder
    with pytest.raises(ValueError, match=r"\['decoder_self'\] select no heads"):
        write_analysis(model, tmp_path / "other", components=["decoder_self"])
    direct = analyze_model(model)
    for component in ("encoder_self", "decoder_cross"):
        np.testing.assert_allclose(saved["components"][component]["sharing"], direct[component].sharing, atol=1e-6)
        assert saved["components"][component]["load"] == direct[component].load.tolist()
        de = direct[component].tasks.index("de")
        assert saved["components"][component]["selected_heads"]["de"] == direct[component].selected[de].tolist()


# ---- the figures, read off the matplotlib figures (what they show, not only that a PNG is written) ----------------


@pytest.fixture
def encoder_analysis(marian) -> ComponentAnalysis:
    """en, de; H = 4, H' = 8; sharing [[1, .75], [.75, 1]], load [[2 2 1 1 0 0 1 1], [0 2 2 0 2 0 0 2]]."""
    model = marian.model(head_selection_components=["encoder_self"], total_encoder_attention_heads=2 * HEADS)
    set_choice(model, "encoder_self", ENCODER_CHOICE)
    return analyze_model(model)["encoder_self"]


def cell_texts(ax) -> dict[tuple[float, float], str]:
    """The values written in a heatmap's cells, by (x, y) = (column, row)."""
    return {tuple(text.get_position()): text.get_text() for text in ax.texts}


def tick_labels(ticks) -> list[str]:
    return [label.get_text() for label in ticks]


def test_sharing_figure_names_the_tasks_on_both_axes_and_writes_each_value(encoder_analysis, tmp_path):
    ax = head_sharing_figure(encoder_analysis).axes[0]
    assert tick_labels(ax.get_xticklabels()) == ["en", "de"]
    assert tick_labels(ax.get_yticklabels()) == ["en", "de"]
    assert cell_texts(ax) == {(0, 0): "1.00", (1, 0): "0.75", (0, 1): "0.75", (1, 1): "1.00"}
    assert "encoder self-attention" in ax.get_title() and f"H={HEADS} heads" in ax.get_title()
    assert ax.images[0].get_clim() == (0.0, 1.0)  # a fraction: the colour bar spans 0 to 1
    path = plot_head_sharing(encoder_analysis, tmp_path / "new" / "plots" / "sharing.png")  # creates the folders
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_load_figure_puts_each_count_in_its_layer_row_and_head_column(encoder_analysis):
    ax = head_load_figure(encoder_analysis).axes[0]
    load = encoder_analysis.load  # [layers, H']
    assert cell_texts(ax) == {(c, r): str(load[r, c]) for r in range(load.shape[0]) for c in range(load.shape[1])}
    assert list(ax.get_xticks()) == list(range(2 * HEADS)) and list(ax.get_yticks()) == [0, 1]
    assert ax.get_xlabel() == f"candidate head (H'={2 * HEADS})" and ax.get_ylabel() == "layer"
    assert ax.images[0].get_clim() == (0, 2)  # from no task to every task
    assert "of 2: en, de" in ax.get_title()


def test_heatmaps_of_many_heads_are_not_annotated():
    wide = ComponentAnalysis(component="encoder_self", tasks=["en", "de"], heads=15, total_heads=30,
                             selected=np.zeros((2, 2, 15), dtype=int), sharing=np.ones((2, 2)),
                             load=np.zeros((2, 30), dtype=int))  # H' = 30 columns: the numbers would be unreadable
    assert len(head_load_figure(wide).axes[0].texts) == 0
    assert len(head_sharing_figure(wide).axes[0].texts) == 4  # 2 x 2 tasks still are


# ---- selection stability ------------------------------------------------------------------------------------------


def snapshot_line(step: int, en: list[list[int]], de: list[list[int]]) -> str:
    return json.dumps({"step": step, "selections": {"encoder_self": {"en": en, "de": de}}})


A, B, C = [[0, 1], [2, 3]], [[0, 1], [2, 7]], [[4, 5], [2, 7]]


def write_log(path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_changed_heads_counts_swapped_heads_not_shifted_slots():
    # subset lists its heads sorted: swapping head 0 for head 7 shifts every slot, and is one change
    assert changed_heads(torch.tensor([[0, 1, 2]]), torch.tensor([[1, 2, 7]])) == 1
    assert changed_heads(torch.tensor([[[0, 3], [4, 6]]]), torch.tensor([[[1, 3], [4, 6]]])) == 1  # [task, layer, H]
    assert changed_heads(torch.tensor([[0, 1]]), torch.tensor([[0, 1]])) == 0


def test_stability_from_hand_written_log(tmp_path):
    log_path = tmp_path / "head_selection_log.jsonl"
    write_log(log_path, [
        snapshot_line(0, A, A),
        snapshot_line(10, B, A),  # en: 1 change
        snapshot_line(20, B, C),  # de: 3 changes
        snapshot_line(30, B, C),  # none
        snapshot_line(40, B, C),
    ])
    log = read_selection_log(log_path)
    assert [s.step for s in log.snapshots] == [0, 10, 20, 30, 40] and not log.skipped
    stability = selection_stability(log.snapshots)
    assert [c["step"] for c in stability["changes"]] == [10, 20, 30, 40]
    assert [c["total"] for c in stability["changes"]] == [1, 3, 0, 0]
    assert [c["tasks"]["encoder_self"]["de"] for c in stability["changes"]] == [0, 3, 0, 0]
    assert stability["stable_since"] == {"encoder_self": {"en": 10, "de": 20}}
    assert stability["stable_for_steps"] == {"encoder_self": {"en": 30, "de": 20}}


def test_stability_of_a_task_that_never_changes_is_the_first_step():
    snapshots = [SelectionSnapshot(5, {"encoder_self": {"en": A}}), SelectionSnapshot(9, {"encoder_self": {"en": A}})]
    assert selection_stability(snapshots)["stable_since"] == {"encoder_self": {"en": 5}}
    with pytest.raises(ValueError, match="at least one snapshot"):
        selection_stability([])


def test_stability_refuses_snapshots_of_different_models():
    one = SelectionSnapshot(0, {"encoder_self": {"en": [[0, 1]]}})
    with pytest.raises(ValueError, match=r"step 1 has encoder_self tasks \['de', 'en'\] instead of the \['en'\]"):
        selection_stability([one, SelectionSnapshot(1, {"encoder_self": {"en": [[0, 1]], "de": [[0, 1]]}})])
    with pytest.raises(ValueError, match=r"step 1 has \[layers, H\] \[2, 2\] for encoder_self 'en' instead of"):
        selection_stability([one, SelectionSnapshot(1, {"encoder_self": {"en": [[0, 1], [2, 3]]}})])
    with pytest.raises(ValueError, match=r"step 1 has components \['decoder_self'\] instead of"):
        selection_stability([one, SelectionSnapshot(1, {"decoder_self": {"en": [[0, 1]]}})])


def test_log_of_a_model_selecting_in_no_component_is_valid(marian, tmp_path, caplog):
    model = marian.model(head_selection_components=[])
    model.save_pretrained(tmp_path / "model")
    write_log(tmp_path / "model" / analysis.SELECTION_LOG_NAME,
              [json.dumps(selection_snapshot(model, step)) for step in (0, 10, 20)])  # what the Trainer appends
    log = read_selection_log(tmp_path / "model" / analysis.SELECTION_LOG_NAME)
    assert [s.step for s in log.snapshots] == [0, 10, 20] and not log.skipped
    assert "skipped" not in caplog.text
    result = write_analysis(tmp_path / "model", tmp_path / "out")
    assert result["figures"] == [] and result["stability"]["stable_since"] == {}
    assert [change["total"] for change in result["stability"]["changes"]] == [0, 0]


def test_bad_log_lines_are_skipped_and_counted_and_resume_supersedes(tmp_path):
    log_path = tmp_path / "log.jsonl"
    write_log(log_path, [
        snapshot_line(0, A, A),
        "{not json",
        json.dumps({"selections": {}}),  # no step
        json.dumps({"step": 3, "selections": {"encoder_self": {"en": [[0, 1], [2]], "de": A}}}),  # ragged
        json.dumps({"step": 4, "selections": {"encoder_self": {"en": A}}}),  # a task missing
        snapshot_line(10, B, A),
        snapshot_line(20, C, A),
        snapshot_line(10, A, A),  # resumed from the step-10 checkpoint: replaces steps 10 and 20
        snapshot_line(20, A, B),
    ])
    log = read_selection_log(log_path)
    assert dict(log.skipped) == {"invalid json": 1, "missing step or selections": 1, "malformed selections": 1,
                                 "different tasks or shape": 1}
    assert log.superseded == 2
    assert [s.step for s in log.snapshots] == [0, 10, 20]
    assert selection_stability(log.snapshots)["stable_since"] == {"encoder_self": {"en": 0, "de": 20}}
    with pytest.raises(ValueError, match="does not exist"):
        read_selection_log(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("selections", [
    [A],  # not a dict of components
    {"decoder_selfish": {"en": A}},  # not a component
    {"encoder_self": []},  # tasks not a dict
    {"encoder_self": {}},  # no task
    {"encoder_self": {"en": "A"}},  # layers not a list
    {"encoder_self": {"en": []}},  # no layer
    {"encoder_self": {"en": [0, 1]}},  # a layer not a list of heads
    {"encoder_self": {"en": [[0, -1]]}},  # a negative head
    {"encoder_self": {"en": [[0, 1.0]]}},  # a head not an int
], ids=["list", "unknown-component", "tasks-list", "no-task", "layers-str", "no-layer", "flat-layer",
        "negative-head", "float-head"])
def test_each_malformed_selection_record_is_skipped_and_counted(tmp_path, selections):
    log_path = tmp_path / "log.jsonl"
    write_log(log_path, [snapshot_line(0, A, A), json.dumps({"step": 5, "selections": selections}),
                         snapshot_line(10, B, A)])
    log = read_selection_log(log_path)
    assert dict(log.skipped) == {"malformed selections": 1}
    assert [s.step for s in log.snapshots] == [0, 10]


def test_cli_writes_stability_plot_from_the_log_next_to_the_model(marian, tmp_path, capsys):
    model = marian.model(head_selection_components=["encoder_self"])
    set_choice(model, "encoder_self", ENCODER_CHOICE)
    model.save_pretrained(tmp_path / "model")
    write_log(tmp_path / "model" / analysis.SELECTION_LOG_NAME,
              [snapshot_line(0, A, A), snapshot_line(10, B, A), snapshot_line(20, B, A)])

    assert analysis.main([str(tmp_path / "model"), "--output_dir", str(tmp_path / "out")]) == 0

    stability_png = (tmp_path / "out" / analysis.STABILITY_PLOT_NAME).read_bytes()
    assert stability_png.startswith(PNG_MAGIC)
    saved = json.loads((tmp_path / "out/analysis.json").read_text())
    assert saved["stability"]["stable_since"] == {"encoder_self": {"en": 10, "de": 0}}
    assert saved["components"]["encoder_self"]["summary"]["mean_sharing_between_tasks"] == pytest.approx(0.75)
    assert "selection stable since" in capsys.readouterr().out


def two_component_stability() -> dict:
    """encoder_self: en changes 1 head at step 10; decoder_self: fr changes 3 at step 20, de never."""
    selections = [({"en": A}, {"de": A, "fr": A}), ({"en": B}, {"de": A, "fr": A}), ({"en": B}, {"de": A, "fr": C})]
    return selection_stability([SelectionSnapshot(step, {"encoder_self": enc, "decoder_self": dec})
                                for step, (enc, dec) in zip((0, 10, 20), selections)])


def test_stability_figure_draws_each_components_changes_and_each_tasks_row():
    top, bottom = selection_stability_figure(two_component_stability()).axes[:2]
    lines = {line.get_label(): list(line.get_ydata()) for line in top.get_lines()}
    assert lines == {"encoder self-attention": [1, 0], "decoder self-attention": [0, 3]}
    assert tick_labels(bottom.get_xticklabels()) == ["10", "20"]  # the logged steps, not their positions
    labels = tick_labels(bottom.get_yticklabels())
    assert labels == ["encoder_self: en", "decoder_self: de", "decoder_self: fr"]
    image = bottom.images[0]
    grid = np.asarray(image.get_array())
    assert grid.tolist() == [[1, 0], [0, 0], [0, 3]]
    _, _, low, high = image.get_extent()
    for row, (label, tick) in enumerate(zip(labels, bottom.get_yticks())):  # row i is drawn at its label's tick
        assert high + (row + 0.5) * (low - high) / len(grid) == pytest.approx(tick), label


def test_stability_plot_of_two_logged_steps_and_refusals(tmp_path):
    one_change = selection_stability([SelectionSnapshot(0, {"encoder_self": {"en": A}}),
                                      SelectionSnapshot(10, {"encoder_self": {"en": B}})])
    path = plot_selection_stability(one_change, tmp_path / analysis.STABILITY_PLOT_NAME)  # the least it needs
    assert path.read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="at least two logged steps"):
        plot_selection_stability({**one_change, "changes": []}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="needs a selecting component"):
        plot_selection_stability({**one_change, "stable_since": {}}, tmp_path / "y.png")


# A wrong selection must be refused, not turned into a wrong Figure 3 (sharing) or load plot.
def test_selections_out_of_range_or_repeated_anywhere_are_refused():
    with pytest.raises(ValueError, match=r"candidate indices in \[0, 4\)"):
        head_load(torch.tensor([[[0, 4]]]), 4)  # H' itself is out of range
    with pytest.raises(ValueError, match="task 0, layer 0 lists head 0 twice"):  # not next to each other
        head_sharing_matrix(torch.tensor([[[0, 1, 0]], [[0, 1, 2]]]), 4)


# The stability plot must not mix a model selecting in no component with records of another model.
def test_a_first_snapshot_of_no_component_is_the_reference_shape(tmp_path):
    """A model selecting in no component logs `{}`: later records of another shape are a different model."""
    log_path = tmp_path / "log.jsonl"
    write_log(log_path, [json.dumps({"step": 0, "selections": {}}), snapshot_line(10, A, A)])
    log = read_selection_log(log_path)
    assert [s.step for s in log.snapshots] == [0] and dict(log.skipped) == {"different tasks or shape": 1}
