"""Module __getattr__ for the TF names actorflow does not have yet: an AttributeError that says
so, instead of a stub that would do something else."""


def missing_names(module_name):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError("module %r has no attribute %r" % (module_name, name))
        raise AttributeError("module %r has no attribute %r: actorflow has no %r (op or API) yet"
                             % (module_name, name, name))
    return __getattr__
