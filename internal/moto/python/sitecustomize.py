"""Makes moto's DynamoDB transactions cheap; loaded by moto_server at startup.

internal/moto puts this directory first on PYTHONPATH of the moto_server it
starts. moto copies every table a TransactWriteItems names before running
it, to restore the copy if the transaction is cancelled: a cost that grows
with the table. Here the copy is replaced by a copy of only the items the
transaction names, restored the same way. That is equivalent because
internal/moto's proxy runs one request at a time per table. Conditions,
updates and cancellation reasons are moto's own code, unchanged.

If moto is not the version this was written for, nothing is patched.
"""

import copy as _copy


def _patch():
    try:
        import moto
        import moto.dynamodb.models as models
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.table import Table
    except Exception:
        return
    if not moto.__version__.startswith("5.") or getattr(models, "copy", None) is not _copy:
        return
    original = models.DynamoDBBackend.transact_write_items

    class _Table:
        """What the patched copy returns for a table: the table itself."""

        def __init__(self, table):
            self.table = table

    class _Copy:
        def __getattr__(self, name):
            return getattr(_copy, name)

        def deepcopy(self, x, memo=None):
            if isinstance(x, Table):
                return _Table(x)
            return _copy.deepcopy(x, memo)

    def transact_write_items(self, transact_items):
        saved = []
        for entry in transact_items:
            try:
                op = next(iter(entry.values()))
                table = self.tables.get(op.get("TableName"))
                if table is None:
                    continue
                key = op.get("Key") or op.get("Item") or {}
                h = DynamoType(key[table.hash_key_attr])
                r = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
                saved.append((table, h, r, _copy.deepcopy(table.get_item(h, r))))
            except Exception:
                continue
        try:
            return original(self, transact_items)
        except Exception:
            # moto put back its "copies": put back the tables, then the items.
            for name, t in list(self.tables.items()):
                if isinstance(t, _Table):
                    self.tables[name] = t.table
            for table, h, r, old in reversed(saved):
                if old is None:
                    table.delete_item(h, r)
                elif r is not None:
                    table.items[h][r] = old
                else:
                    table.items[h] = old
            raise

    models.copy = _Copy()
    models.DynamoDBBackend.transact_write_items = transact_write_items


_patch()
