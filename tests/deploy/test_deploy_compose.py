# SPDX-License-Identifier: GPL-3.0-or-later
"""docker-compose.yml and docker/compose.gpu.yml, read as Compose would, without an engine."""

from __future__ import annotations

import re

import click
import pytest

HYPERSCAN_SERVICES = {"study-create", "worker", "dashboard", "export"}


def test_compose_parses_with_the_services_of_a_scan(deploy):
    document = deploy.compose()
    assert set(document["services"]) == {"postgres", *HYPERSCAN_SERVICES}
    assert set(deploy.hyperscan_services(document)) == HYPERSCAN_SERVICES
    for name, service in deploy.hyperscan_services(document).items():
        build = service["build"]
        assert (deploy.repo / build["context"] / build["dockerfile"]).is_file(), name
        assert build["dockerfile"] == "docker/Dockerfile.cpu", name


def test_every_service_command_is_a_valid_hyperscan_invocation(deploy):
    """The image's entrypoint is `hyperscan`: a service's command is its argument list."""
    for gpu in (False, True):
        document = deploy.compose(gpu=gpu)
        for name, service in deploy.hyperscan_services(document).items():
            args = deploy.as_list(service["command"])
            env = deploy.environment(service)
            contexts = deploy.parse_invocation(args, env)
            path = [ctx.info_name for ctx in contexts[1:]]
            assert path == args[: len(path)], name
            usage = deploy.help_text(path)
            assert f"Usage: hyperscan {' '.join(path)}" in usage, name
            # and the whole command line, --help appended, through the CLI
            assert "Usage:" in deploy.help_text(args)


def test_the_commands_say_what_the_compose_file_promises(deploy):
    document = deploy.compose()
    services = document["services"]
    create = deploy.parse_invocation(deploy.as_list(services["study-create"]["command"]), {})
    assert create[-1].params["runcard"].as_posix() == "studies/quickstart-scan.yml"
    assert create[-1].params["name"] == "quickstart-scan"
    for name in ("worker", "export"):
        contexts = deploy.parse_invocation(
            deploy.as_list(services[name]["command"]), deploy.environment(services[name])
        )
        assert contexts[-1].params["name"] == "quickstart-scan", name
    worker = deploy.parse_invocation(
        deploy.as_list(services["worker"]["command"]), deploy.environment(services["worker"])
    )[-1]
    assert worker.params["device"] == "cpu"
    # the heartbeat settings of the compose file reach the worker through the environment
    assert worker.params["heartbeat_interval"] == 60
    assert worker.params["grace_period"] == 600
    gpu_worker = deploy.compose(gpu=True)["services"]["worker"]
    params = deploy.parse_invocation(
        deploy.as_list(gpu_worker["command"]), deploy.environment(gpu_worker)
    )[-1].params
    assert params["device"] == "gpu:0"


def test_the_example_runcard_is_mounted_where_the_command_looks(deploy):
    """study-create's runcard path, resolved against the image's WORKDIR and the service's
    mounts, is the repository's studies/quickstart-scan.yml."""
    service = deploy.compose()["services"]["study-create"]
    runcard = deploy.as_list(service["command"])[2]
    in_container = f"{deploy.dockerfile_workdir()}/{runcard}"
    hosts = [
        deploy.repo / m.source / in_container.removeprefix(m.target + "/")
        for m in deploy.mounts(service)
        if m.is_bind and in_container.startswith(m.target + "/")
    ]
    assert hosts and hosts[0].is_file()
    assert hosts[0].resolve() == (deploy.repo / "studies" / "quickstart-scan.yml").resolve()


def test_postgres_has_a_volume_a_health_check_and_no_committed_password(deploy):
    raw = deploy.raw()
    postgres = raw["services"]["postgres"]
    volume = next(m for m in deploy.mounts(postgres) if m.target == "/var/lib/postgresql/data")
    assert not volume.is_bind and volume.source in raw["volumes"]
    assert postgres["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    # the password is interpolated from .env, required, and written nowhere in the file
    assert postgres["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    with pytest.raises(deploy.InterpolationError, match="POSTGRES_PASSWORD"):
        deploy.interpolate(postgres["environment"]["POSTGRES_PASSWORD"], {})
    text = deploy.compose_path.read_text()
    example_password = deploy.env_example()["POSTGRES_PASSWORD"]
    assert example_password not in text
    # one-shots wait for the database, workers and dashboard for the study
    services = raw["services"]
    assert services["study-create"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("worker", "dashboard"):
        condition = services[name]["depends_on"]["study-create"]["condition"]
        assert condition == "service_completed_successfully", name
        # on the database directly: `docker compose down` stops them before it, so a worker's
        # SIGTERM re-queue still reaches the database
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name
    assert services["export"]["depends_on"]["worker"]["condition"] == (
        "service_completed_successfully"
    )
    assert services["study-create"]["restart"] == "no"


def test_every_required_variable_is_in_env_example_and_env_is_never_committed(deploy):
    required = set(re.findall(r"\$\{([A-Za-z_]\w*):?\?", deploy.compose_path.read_text()))
    assert required
    assert required <= set(deploy.env_example())
    ignored = (deploy.repo / ".gitignore").read_text().splitlines()
    assert ".env" in ignored
    assert not deploy.in_build_context(".env")


def test_the_storage_url_names_the_database_service_and_carries_no_password(deploy):
    for name, service in deploy.hyperscan_services(deploy.compose()).items():
        env = deploy.environment(service)
        url = env["HYPERSCAN_STORAGE"]
        assert re.fullmatch(r"postgresql://[^:@/]+@postgres:5432/\w+", url), (name, url)
        assert env["PGPASSWORD"] == deploy.env_example()["POSTGRES_PASSWORD"], name


def test_the_worker_scales_and_the_dashboard_is_local_only(deploy):
    services = deploy.compose()["services"]
    for name in ("worker", "study-create", "export"):
        # --scale needs no fixed name and no published port
        assert "container_name" not in services[name], name
        assert "ports" not in services[name], name
    ports = services["dashboard"]["ports"]
    assert ports and all(str(port).startswith("127.0.0.1:") for port in ports)
    dashboard = deploy.parse_invocation(deploy.as_list(services["dashboard"]["command"]), {})
    container_port = int(str(ports[0]).rsplit(":", 1)[1])
    assert dashboard[-1].params["port"] == container_port
    postgres_ports = services["postgres"].get("ports", [])
    assert all(str(port).startswith("127.0.0.1:") for port in postgres_ports)


def test_the_gpu_override_reserves_a_gpu_for_the_worker(deploy):
    override = deploy.raw(deploy.gpu_override_path)
    assert set(override["services"]) == {"worker"}
    worker = deploy.compose(gpu=True)["services"]["worker"]
    assert worker["build"]["dockerfile"] == "docker/Dockerfile.gpu"
    assert (deploy.repo / worker["build"]["context"] / worker["build"]["dockerfile"]).is_file()
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert device["device_ids"] == ["0"]
    # the rest of the worker comes from the base file: storage, heartbeat, dependencies
    assert worker["environment"]["HYPERSCAN_GRACE_PERIOD"] == "600"
    assert worker["depends_on"]["study-create"]["condition"] == "service_completed_successfully"


def test_the_base_images_are_the_official_ones_unless_the_environment_names_others(deploy):
    """docker/local-base.sh's stand-ins come in through HYPERSCAN_*_IMAGE; users get the
    official images; Compose v1 (Debian's docker-compose) reads the file: no top-level name."""
    assert "name" not in deploy.raw()
    official = {
        "HYPERSCAN_PYTHON_IMAGE": "python:3.11-slim",
        "HYPERSCAN_POSTGRES_IMAGE": "postgres:17",
        "HYPERSCAN_TENSORFLOW_IMAGE": "tensorflow/tensorflow:2.21.0-gpu",
    }
    local = {variable: f"local/{variable.lower()}" for variable in official}
    for images in (official, local):
        env = images if images is local else {}
        document = deploy.compose(env)
        assert document["services"]["postgres"]["image"] == images["HYPERSCAN_POSTGRES_IMAGE"]
        for name, service in deploy.hyperscan_services(document).items():
            assert service["build"]["args"]["BASE_IMAGE"] == images["HYPERSCAN_PYTHON_IMAGE"]
            assert service["init"] is True, name  # signals reach hyperscan; zombies reaped
        gpu_worker = deploy.compose(env, gpu=True)["services"]["worker"]
        assert gpu_worker["build"]["args"]["BASE_IMAGE"] == images["HYPERSCAN_TENSORFLOW_IMAGE"]
    assert deploy.env_example()["COMPOSE_PROJECT_NAME"] == "hyperscan"  # volume names kept


@pytest.mark.parametrize(
    "args",
    [
        ["worker", "--device", "cpu"],  # --study missing
        ["worker", "--study", "s", "--bogus"],
        ["worker", "--study", "s", "--threads", "0"],
        ["study", "creat", "studies/quickstart-scan.yml"],
        ["dashboard", "--port", "99999"],
        ["export", "--study", "s"],  # -o missing
    ],
)
def test_the_invocation_check_catches_mistakes(deploy, args):
    with pytest.raises(click.UsageError):
        deploy.parse_invocation(args, {})
