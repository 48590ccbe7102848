"""SQL only: plain async functions that take a connection and return models or plain values.

Store functions never open transactions or commit; services own transactions. Parameters are
always ``$n`` placeholders. Unique violations become domain errors here, where the constraint
name is known.
"""
