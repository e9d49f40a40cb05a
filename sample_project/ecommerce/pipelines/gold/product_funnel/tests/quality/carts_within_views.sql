-- An add-to-cart always follows a view of the product, so carts never exceed views.
SELECT product_id, page_views, add_to_carts, view_to_cart_rate
FROM {{ this }}
WHERE add_to_carts > page_views
   OR view_to_cart_rate < 0
   OR view_to_cart_rate > 1
   OR viewing_sessions > page_views
