"""The drift monitor: conformal test martingales on the served scores."""
