"""/healthz and JSON errors."""
from edge.digest.compiled import IMPL


def test_healthz_checks_the_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok", "database": "ok", "impl": IMPL}


def test_healthz_tells_which_implementation_of_the_compiled_parts_runs(client):
    """The test machine builds them (ops/setup); SEED_IMPL=python would make it "python"."""
    assert client.get("/healthz").get_json()["impl"] == IMPL in ("c", "python")


def test_unknown_path_is_a_json_error(client):
    response = client.get("/nope")
    assert response.status_code == 404
    body = response.get_json()
    assert body["error"] == "not_found" and body["message"]


def test_wrong_method_is_a_json_405(client):
    response = client.post("/healthz")
    assert response.status_code == 405
    assert response.get_json()["error"] == "method_not_allowed"
    assert "GET" in response.headers["Allow"]
