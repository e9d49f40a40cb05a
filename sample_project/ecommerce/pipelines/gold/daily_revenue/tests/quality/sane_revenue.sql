SELECT order_date, category, gross_revenue, returned_revenue, net_revenue
FROM {{ this }}
WHERE gross_revenue <= 0
   OR returned_revenue < 0
   OR net_revenue < 0
   OR net_revenue <> gross_revenue - returned_revenue
   OR order_count <= 0
   OR customer_count > order_count
