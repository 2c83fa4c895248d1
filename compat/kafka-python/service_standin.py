"""Stand-in for kafka-python's ``test/service.py``, which its sdist leaves out.

Against an external broker (KAFKA_URI) the suite only needs an object that names the host and port
and whose lifecycle calls do nothing; spawning a JVM broker is not possible here.
"""


class ExternalService:
    def __init__(self, host, port):
        self.host = host
        self.port = port

    def start(self):
        return None

    def stop(self):
        return None

    def dump_logs(self):
        return None

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("this compat run only targets an external broker (KAFKA_URI)")
