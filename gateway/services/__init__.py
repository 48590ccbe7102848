"""Domain logic. Services own transactions and call ``store`` functions inside them."""
