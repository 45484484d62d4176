import json

import pytest
from holter_server.importers import ImportFormatError, detect_format, open_source, read_series


def test_trainer_state_log_history_gives_train_and_eval_series(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(
        json.dumps(
            {
                "global_step": 30,
                "log_history": [
                    {"epoch": 0.1, "grad_norm": 1.0, "learning_rate": 1e-4, "loss": 2.07, "step": 15},
                    {"epoch": 0.2, "grad_norm": 1.1, "learning_rate": 1e-4, "loss": 2.05, "step": 30},
                    {"epoch": 0.2, "eval_loss": 1.62, "eval_runtime": 3.0, "step": 30},
                ],
            }
        )
    )
    series = read_series(path)
    assert detect_format(path) == "trainer_state"
    assert series["loss"].steps.tolist() == [15, 30]
    assert series["eval_loss"].values.tolist() == [1.62]


def test_json_without_log_history_is_a_format_error(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text('{"global_step": 3}')
    with pytest.raises(ImportFormatError, match="log_history"):
        read_series(path)


def test_the_models_config_json_beside_it_is_the_config(tmp_path):
    import json

    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 2.0}]}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 768}))
    source = open_source(tmp_path / "trainer_state.json")
    list(source.points)
    assert source.config == {"model_type": "gpt2", "n_embd": 768}
